"""The manifest committer's stages, each a function with explicit input and output."""
