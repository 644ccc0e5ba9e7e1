"""The ground floor: what every other wing may use, importing nothing of the harness itself.

``errors`` (UserError: a one-line message naming file and key), ``config`` (TOML tables into frozen
dataclasses, unknown keys refused), ``credentials`` (what a credential inside a string looks like: refused
in configuration, masked in output), ``escaping`` (a string from the data made safe for
HTML, a Markdown cell, the terminal or XML text), ``nofollow`` (writes in a results folder that never follow a
planted symbolic link), ``network`` (link rates such as "1gbit"; a free port for a server
started here), ``registry`` (a name to its plug-in's declaration, the unknown ones listed) and ``delay_line``
(a link's latency where the kernel has no ``netem``: the packets arriving
through an interface held in user space).
"""
