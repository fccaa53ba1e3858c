"""The page for people: server-rendered HTML over the same queries as the JSON API."""
