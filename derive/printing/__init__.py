"""Every SymPy printer of derive, each a subclass of SymPy's own (sympy/printing/).

``latex``: the sheet's notation and term orders; ``python``: exact (int, Fraction)
and numpy code through ``lambdify``; ``javascript``: the page's calculator;
``factored``: the unevaluated factor(coefficient) node all of them print.
"""
