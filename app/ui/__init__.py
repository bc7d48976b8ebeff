"""What several pages share: the answer card, the shared views and charts of a trace (token sources,
the stuffed reading, citations), the palette, safe text, background jobs, the sidebar, detours and
the question box."""
