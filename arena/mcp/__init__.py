"""Arena environments served over the Model Context Protocol."""
