"""Evidence extraction, failure taxonomy and the diagnosis agent."""
