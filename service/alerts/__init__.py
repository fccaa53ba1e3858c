"""Price-change alerts: API keys, subscription matching, the outbox, webhook delivery."""
