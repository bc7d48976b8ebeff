"""The one door into the engine: what the app may reach, and nothing else."""
