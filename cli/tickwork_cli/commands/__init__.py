"""One module per concept: login, jobs, runs, files (plan/apply), completion."""
