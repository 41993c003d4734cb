"""The kernel language up to the checked program.

The grammar and parser (``parse``, ``grammar.lark``) build the syntax tree
(``syntax_tree``); the checker (``check`` and its parts ``check_support``,
``check_calls``, ``check_builtins``, ``check_schedule``) resolves names,
types and shapes into the checked program (``checked``), which ``printer``
shows as text. It imports nothing from the rest of vtacc; from vtasm only
the error types.
"""
