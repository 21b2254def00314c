"""The planner's library: the layout search and ranking (``search``) and the allocator's rounding (``rounding``)."""
