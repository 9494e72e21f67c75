print("chime-bench")
