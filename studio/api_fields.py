"""Bounds of integer inputs of the REST API: only values the database columns can hold.

An unbounded ``serializers.IntegerField`` lets ``10**30`` through to the database, where SQLite
raises ``OverflowError`` and PostgreSQL ``NumericValueOutOfRange`` (a 500); with these bounds the
serializer answers 400 naming the field, and the OpenAPI schema states the range.
"""

#: an object id (``BigAutoField``: signed 64-bit, ids start at 1)
ID_BOUNDS = {"min_value": 1, "max_value": 2**63 - 1}
#: a value stored in an ``IntegerField`` column (signed 32-bit on PostgreSQL)
INT_BOUNDS = {"min_value": -(2**31), "max_value": 2**31 - 1}
