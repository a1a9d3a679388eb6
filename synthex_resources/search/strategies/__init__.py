"""Search strategies, one module per family, named as its user-facing mode is named (the modes are the
instances in ``builtin``):

- ``base``: ``SearchStrategy``, the base every strategy subclasses, and ``param``;
- ``registry``: ``StrategyRegistry`` and ``load_search_strategies()``, the one list every door reads;
- ``builtin``: the built-in modes, registered through the ``register_search_strategies`` hook;
- ``hybrid``: ``bm25``, ``dense``, ``hybrid``, ``hybrid-equal`` (record fusion);
- ``conversational``: ``conversational`` (leaf-sum); its parts ``conversational_fusion``,
  ``conversational_multihop``, ``conversational_temporal``;
- ``hierarchical``: ``hierarchical``, ``hierarchical-speaker``, ``hierarchical-expanded`` (drill-down); its parts
  ``hierarchical_drill_down`` and ``hierarchical_expanded`` (word-neighbour expansion);
- ``hierarchical_fresh``: ``hierarchical-fresh`` (newer statements first, around ``hierarchical-expanded``).

A family's mode module holds its parameters and is cheap to import; its parts (numpy, scipy) load at its
first search, so the registry loads without them (``synthex search --help``). The structures strategies read
per table version are in ``search/indexes/``.
"""
