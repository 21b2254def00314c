"""The options the front ends share: number syntax, error lines, the report's and the layout's option sets.

``values``: the ASCII number syntax and the argparse types (the web page ships the same patterns);
``messages``: UsageError, the one-line error and the message table the CLI and the page both read;
``report``: the report's parser and the field -> option table; ``layout``: the layout options of
derive.comm and derive.predict. Every front end (derive.cli, derive.plan, derive.predict,
derive.comm, derive.calibrate, the web page) reads these; none imports another front end.
"""
