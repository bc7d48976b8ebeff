"""The Index swap page's parts."""
