"""node/threads.py: idle pool threads spin only where every task's threads have a CPU."""

from syncswitch.node import graph as graphmod
from syncswitch.node import threads

LOCAL = ["127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003", "127.0.0.1:5004"]
SPREAD = ["10.0.0.1:2222", "10.0.0.2:2222", "10.0.0.3:2222", "10.0.0.1:2223"]


def test_tasks_on_one_host_are_counted_together():
    assert threads.colocated(LOCAL, 2) == 4
    assert threads.colocated(SPREAD, 0) == 2 and threads.colocated(SPREAD, 1) == 1


def test_local_nodes_sharing_two_cores_do_not_spin_and_a_node_alone_on_a_big_machine_does():
    assert not threads.may_spin(LOCAL, 0, 3, cores=2, quota=None)
    assert threads.may_spin(LOCAL, 0, 3, cores=16, quota=None)
    assert threads.may_spin(SPREAD, 1, 3, cores=4, quota=None)
    assert not threads.may_spin(SPREAD, 0, 3, cores=4, quota=None)  # two tasks on 10.0.0.1


def test_a_node_in_a_budget_smaller_than_its_threads_does_not_spin():
    assert not threads.may_spin(SPREAD, 1, 3, cores=16, quota=0.4)
    assert threads.may_spin(SPREAD, 1, 3, cores=16, quota=4.0)


def test_the_sessions_and_servers_config_carry_the_decision():
    assert graphmod.session_config(4, 0, 1, 2, spin=False).experimental.disable_thread_spinning
    assert not graphmod.session_config(4, 0, 1, 2).experimental.disable_thread_spinning
