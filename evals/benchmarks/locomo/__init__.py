"""LoCoMo: the data file's reader (``data``), the benchmark (``benchmark``), its scoring (``scoring``)."""
