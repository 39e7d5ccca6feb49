"""Video and audio decoded just in time: fixtures, backends, clips, audio windows (ch. 15)."""
