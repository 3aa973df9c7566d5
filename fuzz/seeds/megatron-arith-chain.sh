v0=v1+v1+v1+v1
v1=v2+v2+v2+v2
v2=v3+v3+v3+v3
v3=v4+v4+v4+v4
v4=v5+v5+v5+v5
v5=v6+v6+v6+v6
v6=v7+v7+v7+v7
v7=v8+v8+v8+v8
v8=v9+v9+v9+v9
v9=v10+v10+v10+v10
v10=v11+v11+v11+v11
v11=v12+v12+v12+v12
v12=v13+v13+v13+v13
v13=v14+v14+v14+v14
v14=v15+v15+v15+v15
v15=1
torchrun x.py --num-layers $((v0))
