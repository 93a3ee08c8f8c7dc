"""Peer training scripts for `python -m bench.peers`: what a TensorFlow user runs without syncswitch."""
