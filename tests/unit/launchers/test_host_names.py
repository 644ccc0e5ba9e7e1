"""Host names are checked as host names before any launcher sees them (issue 52): a name that starts with
"-" reached ssh as an option and mpirun's --host list raw. Before harness.launchers.hosts.HOST_FIELD
these option values loaded as given (test_a_bad_host_is_refused_at_load failed)."""

import pytest

from harness.base import config
from harness.base.errors import UserError
from harness.launchers import hosts, mpirun, torchrun
from harness.launchers import horovodrun

BAD = ("-oProxyCommand=touch /tmp/x", "a,b", "h:4", "a b", "x" * 64, "", "node\n1", "..", "a..b", "-")
GOOD = ("node1", "gpu-07.cluster.example", "10.0.0.1", "::1", "fe80::1%eth0", "rosetta-h0")


@pytest.mark.parametrize("options", [mpirun.Options, torchrun.Options, horovodrun.Options])
@pytest.mark.parametrize("bad", BAD)
def test_a_bad_host_is_refused_at_load(options, bad):
    where = config.Where("scenario.toml", "launcher_options.x")
    with pytest.raises(UserError) as err:
        config.build(options, {"hosts": ["node0", bad]}, where)
    message = str(err.value)
    assert "\n" not in message and "hosts" in message and "host name (RFC 1123)" in message


@pytest.mark.parametrize("options", [mpirun.Options, torchrun.Options])
def test_addresses_are_checked_too(options):
    with pytest.raises(UserError, match="addresses"):
        config.build(options, {"hosts": ["a", "b"], "addresses": ["10.0.0.1", "--evil"]},
                     config.Where("scenario.toml", "launcher_options.x"))


@pytest.mark.parametrize("good", GOOD)
def test_names_and_addresses_load(good):
    assert config.build(mpirun.Options, {"hosts": [good]}, config.Where("s", "k")).hosts == (good,)


def test_ssh_gets_an_end_of_options_before_the_host():
    assert hosts.prefix(hosts.RemoteShell.SSH, "node1")[-2:] == ("--", "node1")
