from calc import add

assert add(2, 3) == 5, f"add(2, 3) is {add(2, 3)}"
print("test_calc: passed")
