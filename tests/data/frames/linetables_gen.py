import sys, json
def sample(n, items):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            total += (i *
                      2)
        else:
            total -= 1
    try:
        x = {k: v
             for k, v in items}
    except ValueError:
        x = None
    return total, x

code = sample.__code__
v = sys.version_info
tab = code.co_linetable
expected = {}
if v >= (3, 11):
    for idx, pos in enumerate(code.co_positions()):
        expected[idx] = pos[0] if pos[0] is not None else -1
else:
    for start, end, line in code.co_lines():
        for b in range(start, end, 2):
            expected[b // 2] = line if line is not None else -1
n = len(code.co_code) // 2
pairs = [(i, expected.get(i, -1)) for i in range(n)]
print(json.dumps({"version": "%d.%d" % (v[0], v[1]), "firstlineno": code.co_firstlineno,
                  "table": list(tab), "lines": pairs}))
