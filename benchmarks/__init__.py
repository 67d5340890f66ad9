"""The benchmark and documentation scripts. Each runs as ``python benchmarks/<name>.py`` and, from a source checkout,
imports as ``benchmarks.<name>`` (the tests import them so; a script that uses another puts the checkout on
``sys.path`` first). They are not installed with the package."""
