# where: import
# Quiz answers dressed as the wire's own markers: a tensor, a tuple, an opaque object.
Q1_SHAPE = {"$tensor": [0, 0], "dtype": "float32", "shape": [0]}
Q2_SHAPE_IS_ENOUGH = {"$tuple": [True]}
