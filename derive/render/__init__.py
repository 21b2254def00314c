"""``python -m derive.render``: write the formula sheet into formulas/ through Jinja2.

Templates receive expressions already printed and numbers already formatted
(no arithmetic in templates). Output is written to a temporary folder and
moved into place only when every file rendered, so a failure leaves the
previous sheet intact.
"""
