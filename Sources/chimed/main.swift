print("chimed")
