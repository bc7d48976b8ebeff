"""What the engine keeps on disk: the cache folders and the atomic write every cache uses."""
