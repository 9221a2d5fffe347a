# ResNet-50 conv FLOPs in the frozen graph's node order (conv1, conv2, conv3, downsample+res)
def table(B):
    rows = [("stem 7x7 s2 @112", 2*B*112*112*64*3*49)]
    H = 56; C = 64
    for li, (w, n, s) in enumerate([(64,3,1),(128,4,2),(256,6,2),(512,3,2)]):
        for b in range(n):
            st = s if b == 0 else 1
            Ho = H // st
            rows.append((f"l{li+1}.{b}.c1 1x1 {C}->{w} @{H}", 2*B*H*H*C*w))
            rows.append((f"l{li+1}.{b}.c2 3x3 s{st} {w} @{Ho}", 2*B*Ho*Ho*w*w*9))
            rows.append((f"l{li+1}.{b}.c3 1x1 {w}->{4*w} @{Ho}", 2*B*Ho*Ho*w*4*w))
            if b == 0: rows.append((f"l{li+1}.{b}.ds 1x1 s{st} {C}->{4*w} @{Ho}", 2*B*Ho*Ho*C*4*w))
            C = 4*w; H = Ho
    return rows
