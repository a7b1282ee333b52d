"""Operations: the daemon, admin API, metrics, logging, configuration, CLI and deploy files."""
