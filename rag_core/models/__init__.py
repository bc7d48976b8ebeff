"""Where models come from: sources (packaged, folders, hub ids), presets (the named stacks' models)
and content keys.
"""
