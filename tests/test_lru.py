"""explorer._src.lru.Lru: the least recent entry goes first, a get makes an entry recent, and
threads that put at once leave exactly `size` entries."""

import threading

import pytest

from explorer._src.lru import Lru


def test_the_least_recently_used_entry_is_forgotten_first():
    lru = Lru(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1          # "a" is now the most recent; "b" the least
    lru.put("c", 3)
    assert "b" not in lru and lru.get("a") == 1 and lru.get("c") == 3 and len(lru) == 2


def test_putting_a_key_again_replaces_its_value_and_makes_it_recent():
    lru = Lru(2)
    lru.put("a", 1)
    lru.put("b", 2)
    lru.put("a", 10)
    lru.put("c", 3)
    assert lru.get("a") == 10 and lru.get("b") is None and len(lru) == 2


def test_clear_forgets_everything():
    lru = Lru(3)
    lru.put(1, "x")
    lru.clear()
    assert len(lru) == 0 and lru.get(1) is None


def test_threads_putting_at_once_leave_exactly_size_entries():
    lru = Lru(50)

    def fill(start):
        for k in range(start, start + 500):
            lru.put(k, k)
            lru.get(k - 1)

    threads = [threading.Thread(target=fill, args=(1000 * t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(lru) == 50


@pytest.mark.parametrize("size", [0, -1])
def test_an_lru_holds_at_least_one_entry(size):
    with pytest.raises(ValueError, match=f"at least 1 entry, not {size}"):
        Lru(size)


def test_a_weighed_lru_forgets_the_least_recent_while_over_its_budget():
    lru = Lru(10, weigh=len, budget=10)
    lru.put("a", "xxxx")            # 4
    lru.put("b", "yyyy")            # 8
    assert lru.get("a") == "xxxx"   # "b" is now the least recent
    lru.put("c", "zzzz")            # 12 > 10: "b" goes, 8 left
    assert "b" not in lru and lru.get("a") == "xxxx" and lru.get("c") == "zzzz"
    assert lru.weight == 8
    lru.put("d", "w" * 50)          # over the budget alone: kept, every older entry goes
    assert len(lru) == 1 and lru.get("d") == "w" * 50 and lru.weight == 50
    lru.put("d", "v")               # a key put again is weighed again
    assert lru.weight == 1
    lru.clear()
    assert lru.weight == 0 and len(lru) == 0


def test_weigh_and_budget_come_together():
    with pytest.raises(ValueError, match="both weigh and budget"):
        Lru(2, weigh=len)
