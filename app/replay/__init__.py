"""The Replay page's parts."""
