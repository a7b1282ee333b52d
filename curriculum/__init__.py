"""Difficulty control, environment and task sampling, arena stratification."""
