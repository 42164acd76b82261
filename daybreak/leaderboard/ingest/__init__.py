"""A file or an upload becomes one validated Submission (or a one-line refusal naming the field): the readers of
DAWNBench v1 files and daybreak's records, the text and plausibility rules, the structured system, and `leaderboard
import`'s safe reading of a folder."""
