"""Published figures reproduced: ``reference`` (results/reference/*.toml as data), ``reproduce`` (a reference's
scenario at this machine's scale and its report beside the published curve), ``published`` (its published
configuration: job scripts, or a cluster's scheduler), ``emulated_reproduction`` (that configuration on the
emulated GPU cluster), ``prediction`` (the scaling model's curve beside them) and ``reference_list``
(``rosetta reproduce --list``).

Imports every wing below it but ``gate`` and ``cli``: ``experiment`` and ``running`` (the runs), ``reports``
(the charts), ``scaling`` (the model's prediction), ``machines`` (the emulated cluster's profiles).
"""
