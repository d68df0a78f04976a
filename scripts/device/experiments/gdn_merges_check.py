# Session 17, a check on this machine (not part of the build or tests): emulates
# gdn_merges_tf32.patch's levels 1 and 2 of the prepare's inverse lane by lane — the fragment
# indices of mma_3xtf32 / store_frag as written there, the m16n8k8 .tf32 fragment layout of the PTX
# ISA, exact products (no tf32 rounding), garbage in every shared-memory cell the kernel must not
# read — and compares the result with (I + A)^-1 of a random strictly lower A. Prints the largest
# difference over the lower triangle (session 17: 4.4e-16).
import random
random.seed(1)
LDA, LDF = 72, 68
N=64
# true A strictly lower
A=[[ (random.uniform(-0.3,0.3) if r>c else 0.0) for c in range(N)] for r in range(N)]
As=[random.uniform(-1e3,1e3) for _ in range(64*LDA)]
for r in range(N):
    for c in range(N):
        if c//16 <= r//16: As[r*LDA+c]=A[r][c]
Ts=[random.uniform(-1e3,1e3) for _ in range(64*LDF)]
def inv_lower_unit(M):  # (I+M)^-1 for strictly lower M (n×n)
    n=len(M); X=[[0.0]*n for _ in range(n)]
    for j in range(n):
        for r in range(n):
            s=1.0 if r==j else 0.0
            for m in range(r): s-=M[r][m]*X[m][j]
            X[r][j]= 0.0 if r<j else s
    return X
for b in range(4):
    blk=[[A[16*b+r][16*b+c] for c in range(16)] for r in range(16)]
    Xi=inv_lower_unit(blk)
    for r in range(16):
        for j in range(16): Ts[(16*b+r)*LDF+16*b+j]=Xi[r][j]
def mma_3xtf32(acc, Abuf, Aoff, lda, Bbuf, Boff, ldb, K0, K1):
    # acc: dict lane -> [4]; emulate fragments per lane, then the mma
    for ks in range(K0,K1):
        k=8*ks
        Am=[[0.0]*8 for _ in range(16)]; Bm=[[0.0]*8 for _ in range(8)]
        for lane in range(32):
            g,t=lane>>2,lane&3
            af=[Abuf[Aoff+g*lda+k+t],Abuf[Aoff+(g+8)*lda+k+t],Abuf[Aoff+g*lda+k+t+4],Abuf[Aoff+(g+8)*lda+k+t+4]]
            bf=[Bbuf[Boff+(k+t)*ldb+g],Bbuf[Boff+(k+t+4)*ldb+g]]
            # PTX m16n8k8 tf32 layout: a0 (g,t) a1 (g+8,t) a2 (g,t+4) a3 (g+8,t+4); b0 (t,g) b1 (t+4,g)
            Am[g][t]=af[0]; Am[g+8][t]=af[1]; Am[g][t+4]=af[2]; Am[g+8][t+4]=af[3]
            Bm[t][g]=bf[0]; Bm[t+4][g]=bf[1]
        D=[[sum(Am[i][kk]*Bm[kk][j] for kk in range(8)) for j in range(8)] for i in range(16)]
        for lane in range(32):
            g,t=lane>>2,lane&3
            a=acc[lane]
            a[0]+=D[g][2*t]; a[1]+=D[g][2*t+1]; a[2]+=D[g+8][2*t]; a[3]+=D[g+8][2*t+1]
def store_frag(buf, off, ld, acc, s):
    for lane in range(32):
        g,t=lane>>2,lane&3; a=acc[lane]
        buf[off+g*ld+2*t]=s*a[0]; buf[off+g*ld+2*t+1]=s*a[1]
        buf[off+(g+8)*ld+2*t]=s*a[2]; buf[off+(g+8)*ld+2*t+1]=s*a[3]
def z(): return {l:[0.0]*4 for l in range(32)}
# Level 1 (warps 0..3; the two products per warp in order; warps independent)
for warp in range(4):
    blk,nt=warp>>1,warp&1; cb=32*blk; rb=16+32*blk
    y=z(); mma_3xtf32(y, As, rb*LDA+cb, LDA, Ts, cb*LDF+cb+8*nt, LDF, 0, 2)
    store_frag(Ts, cb*LDF+rb+8*nt, LDF, y, 1.0)
    t_=z(); mma_3xtf32(t_, Ts, rb*LDF+rb, LDF, Ts, cb*LDF+rb+8*nt, LDF, 0, 2)
    store_frag(Ts, rb*LDF+cb+8*nt, LDF, t_, -1.0)
# Level 2a (all warps compute from the same state, then write): emulate barrier semantics
res=[]
for warp in range(8):
    mt,nt=warp>>2,warp&3
    y=z()
    if nt<2: mma_3xtf32(y, As, (32+16*mt)*LDA, LDA, Ts, 8*nt, LDF, 0, 4)
    else: mma_3xtf32(y, As, (32+16*mt)*LDA, LDA, Ts, 8*nt, LDF, 2, 4)
    res.append((16*mt*LDF+32+8*nt, y))
for off,y in res: store_frag(Ts, off, LDF, y, 1.0)
res=[]
for warp in range(8):
    mt,nt=warp>>2,warp&3
    t_=z()
    if mt==0: mma_3xtf32(t_, Ts, 32*LDF+32, LDF, Ts, 32+8*nt, LDF, 0, 2)
    else: mma_3xtf32(t_, Ts, 48*LDF+32, LDF, Ts, 32+8*nt, LDF, 0, 4)
    res.append(((32+16*mt)*LDF+8*nt, t_))
for off,t_ in res: store_frag(Ts, off, LDF, t_, -1.0)
T=inv_lower_unit(A)
err=max(abs(Ts[r*LDF+c]-T[r][c]) for r in range(N) for c in range(r+1))
print("max |T - ref| over the lower triangle:", err)
