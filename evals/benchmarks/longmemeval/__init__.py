"""LongMemEval: the data file's reader (``data``), the benchmark and its protocols (``benchmark``), and the
checks run on real files (``*_check``)."""
