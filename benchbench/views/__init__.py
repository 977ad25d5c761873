"""Terminal views: result tables and JSON documents (plots live in views.plot)."""
