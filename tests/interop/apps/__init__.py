"""The target applications the stock servers run (each started as its own process by tests.interop.servers)."""
