"""The Train page's parts: the query walk, the fine-tuning panel and their charts (the Map page shows
the walk's pull too)."""
