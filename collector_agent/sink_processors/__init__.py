"""Sink processors, one per module; aliases in ``collector_agent.registry``."""
