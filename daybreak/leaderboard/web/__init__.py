"""The leaderboard on the web: the app and its server's limits (app, limits), the pages and the static export (pages,
boardpage, boardplot, plot, templates/). Nothing here imports the web stack at package level: the command line reads
the limits' defaults from daybreak.leaderboard.web.limits without fastapi."""
