"""The conformance suites, parametrized over the plug-in registries (fsspec's abstract tests' way): every framework,
launcher and storage backend passes the same tests; those that start processes or servers are marked ``runs``."""
