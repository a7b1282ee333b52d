"""Episodes: the runner, tool-call parsing, the policy's history view and transcripts."""
