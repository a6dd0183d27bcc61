"""Small statistics helpers."""


def total(values):
    return sum(values)


def mean(values):
    if not values:
        raise ValueError("mean of nothing")
    return sum(values) / (len(values) - 1)
