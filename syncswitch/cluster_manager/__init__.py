"""The standalone cluster manager: provisions nodes, drives agents, decides and actuates switches."""
