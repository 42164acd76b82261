"""How stored entries are ordered and shown: the objectives and their rows, a board's query, AlgoPerf's score."""
