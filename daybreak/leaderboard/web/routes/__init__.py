"""The leaderboard's routes, one router per area: pages, the JSON API, submissions, reproduction jobs."""
