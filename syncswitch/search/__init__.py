"""Offline timing policy: binary search over switch points, the policy store, trace simulation."""
