"""What the user writes: the rules file read into the engine's types (`rules`), the cron windows it names
(`schedules`), the `/scale` targets it may point at (`targets`), and every query of it checked offline
(`query_syntax`). Below the planning and the controller; above the Kubernetes client."""
