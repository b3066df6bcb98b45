module @torch_tpu attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3x8xf32>) -> (tensor<3x4xf32>) {
    %0 = "stablehlo.reshape"(%arg0) : (tensor<3x8xf32>) -> tensor<24xf32>
    %1 = "stablehlo.constant"() {value = dense<"0x68DC7FBE9682343ED78C213E57028B3D60EEDCBDA06D28BE21DFB4BEDB90183E0ACCA83EEE3A273EC38A9DBE064898BED577A1BE8168293EA8998C3E846B76BD01103C3EDE14D1BD398021BE25DA52BE45A0F0BD1BF49C3E293E173E2972AB3EA0A9013E2D0C5F3EE5B713BE1BDD99BE348B7A3E8F7CACBED013E5BDD0CA8ABDCDA641BECFF7BF3D2FA7893E58EEEF3D8166CFBD6816B1BE3FE64F3E020BB0BE993401BE774365BE298DC53D8ED198BEF7120ABE0F49773E951D27BEF0445CBD09B78E3D62189DBE46D020BEB587ABBD27AE94BEE7B1AB3E73D0A93E636D8D3EE31C623E7DE0733D6027ECBD774818BEF7A7F33D540B453E0A7664BD928D47BE7D39ED3DE768163E64803C3E57D334BE9D65A9BE8F5BA0BEB766E23BCE47E5BDB2A4273EFA43DABD17C130BED9CE90BE4865243EC2CBDB3D321BF13D020A9CBDD47FBABDC4BD3E3EA44713BE99B7AC3EBF88FBBDB0F9563EC05CB13E9F8F0DBD15DFF23D3B3DA1BEE872193EF3D44A3E10343D3EA71450BCDD3D2A3E0155773E55F6B2BE42C61F3E6D519ABE72988BBE26BF89BC9391C23DB7FC58BD4C473BBD27C3AEBD1FBD1DBEDBD48E3EBA0099BE1CC9A33D4AF7953EA9AB48BCEFF575BEB643E2BB5E8CC9BDD7345EBED6CBAE3E1E934FBDCE5094BE760F21BEF16CE7BCF90DEA3D7171253DE4E696BECE149EBE8C4881BE10E468BEEA9977BE44AF47BD"> : tensor<128xf32>} : () -> tensor<128xf32>
    %2 = "stablehlo.constant"() {value = dense<"0x46E4A7BE0C1BA93E211A573EA3B4C3BC50F79B3EFF46593E5918AD3E981F47BE5D6A313ED5F1853E7E7BAFBE720340BEE2678A3E8289F03CC43A053D1C2BB13E"> : tensor<16xf32>} : () -> tensor<16xf32>
    %3 = "stablehlo.constant"() {value = dense<"0x1057E9BD4095C13D40C0123C809C543DC052D6BD9461BFBDA0BD1B3C1C3A163E283841BE20F6913C0C97DA3D905FAB3C249D86BDDAC7373E7061E13CA835AF3D74CD473E7E3840BEB89DF4BDDA23613E488172BE94D385BDBE4228BE9068783D2AA0333EF081E3BC48395E3E42081EBE94A9283EF227493E8883353D40EC73BE80AE5BBBC2020CBEBE6010BE94DB153E002DBFBB2AB8143E80155E3B745EA43D4C642EBE608E0D3D6094C5BCE4FECCBD50E8773D14A229BEBCD42F3E80FD32BC665F0EBEA02E133C603BB23CF4A29D3DBC6D0E3E88A8FABDE447903D1879FEBDD0C455BD202AE13D705D113DA2CF613E061E2DBEAED3713E72A2113EF849C13D"> : tensor<64xf32>} : () -> tensor<64xf32>
    %4 = "stablehlo.constant"() {value = dense<"0x80BF0F3E8E206C3E30D69F3CF0C8A33D"> : tensor<4xf32>} : () -> tensor<4xf32>
    %5 = "stablehlo.composite"(%0, %1, %2, %3, %4) {name = "torch_tpu.graph", decomposition = @graph_main} : (tensor<24xf32>, tensor<128xf32>, tensor<16xf32>, tensor<64xf32>, tensor<4xf32>) -> tensor<12xf32>
    %6 = "stablehlo.reshape"(%5) : (tensor<12xf32>) -> tensor<3x4xf32>
    "func.return"(%6) : (tensor<3x4xf32>) -> ()
  }
  func.func private @graph_f5(%arg0: tensor<24xf32>, %arg1: tensor<128xf32>, %arg2: tensor<16xf32>) -> (tensor<48xf32>) {
    %0 = "stablehlo.reshape"(%arg0) : (tensor<24xf32>) -> tensor<3x8xf32>
    %1 = "stablehlo.reshape"(%arg1) : (tensor<128xf32>) -> tensor<16x8x1xf32>
    %2 = "stablehlo.reshape"(%1) : (tensor<16x8x1xf32>) -> tensor<16x8xf32>
    %3 = "stablehlo.transpose"(%2) {permutation = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
    %4 = "stablehlo.dot_general"(%0, %3) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]} : (tensor<3x8xf32>, tensor<8x16xf32>) -> tensor<3x16xf32>
    %5 = "stablehlo.constant"() {value = dense<0x3F800000> : tensor<f32>} : () -> tensor<f32>
    %6 = "stablehlo.broadcast_in_dim"(%5) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %7 = "stablehlo.multiply"(%4, %6) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %8 = "stablehlo.broadcast_in_dim"(%arg2) {broadcast_dimensions = array<i64: 1>} : (tensor<16xf32>) -> tensor<3x16xf32>
    %9 = "stablehlo.constant"() {value = dense<0x3F800000> : tensor<f32>} : () -> tensor<f32>
    %10 = "stablehlo.constant"() {value = dense<0x00000000> : tensor<f32>} : () -> tensor<f32>
    %11 = "stablehlo.broadcast_in_dim"(%9) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %12 = "stablehlo.multiply"(%8, %11) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %13 = "stablehlo.compare"(%9, %10) {comparison_direction = #stablehlo<comparison_direction EQ>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %14 = "stablehlo.broadcast_in_dim"(%10) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %15 = "stablehlo.select"(%13, %14, %12) : (tensor<i1>, tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %16 = "stablehlo.add"(%15, %7) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %17 = "stablehlo.reshape"(%16) : (tensor<3x16xf32>) -> tensor<48xf32>
    "func.return"(%17) : (tensor<48xf32>) -> ()
  }
  func.func private @graph_f6(%arg0: tensor<48xf32>) -> (tensor<48xf32>) {
    %0 = "stablehlo.reshape"(%arg0) : (tensor<48xf32>) -> tensor<3x16xf32>
    %1 = "stablehlo.constant"() {value = dense<0x3F3504F3> : tensor<f32>} : () -> tensor<f32>
    %2 = "stablehlo.broadcast_in_dim"(%1) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %3 = "stablehlo.multiply"(%0, %2) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %4 = "stablehlo.abs"(%3) : (tensor<3x16xf32>) -> tensor<3x16xf32>
    %5 = "stablehlo.multiply"(%4, %4) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %6 = "stablehlo.constant"() {value = dense<0x3F800000> : tensor<f32>} : () -> tensor<f32>
    %7 = "stablehlo.broadcast_in_dim"(%6) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %8 = "stablehlo.divide"(%7, %5) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %9 = "stablehlo.constant"() {value = dense<0xC1364C58> : tensor<f32>} : () -> tensor<f32>
    %10 = "stablehlo.broadcast_in_dim"(%9) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %11 = "stablehlo.constant"() {value = dense<0x415D5AC4> : tensor<f32>} : () -> tensor<f32>
    %12 = "stablehlo.broadcast_in_dim"(%11) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %13 = "stablehlo.multiply"(%10, %8) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %14 = "stablehlo.add"(%13, %12) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %15 = "stablehlo.constant"() {value = dense<0xC0FA239B> : tensor<f32>} : () -> tensor<f32>
    %16 = "stablehlo.broadcast_in_dim"(%15) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %17 = "stablehlo.multiply"(%14, %8) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %18 = "stablehlo.add"(%17, %16) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %19 = "stablehlo.constant"() {value = dense<0x403EE05D> : tensor<f32>} : () -> tensor<f32>
    %20 = "stablehlo.broadcast_in_dim"(%19) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %21 = "stablehlo.multiply"(%18, %8) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %22 = "stablehlo.add"(%21, %20) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %23 = "stablehlo.constant"() {value = dense<0xBF82C300> : tensor<f32>} : () -> tensor<f32>
    %24 = "stablehlo.broadcast_in_dim"(%23) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %25 = "stablehlo.multiply"(%22, %8) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %26 = "stablehlo.add"(%25, %24) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %27 = "stablehlo.constant"() {value = dense<0x3ED82838> : tensor<f32>} : () -> tensor<f32>
    %28 = "stablehlo.broadcast_in_dim"(%27) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %29 = "stablehlo.multiply"(%26, %8) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %30 = "stablehlo.add"(%29, %28) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %31 = "stablehlo.constant"() {value = dense<0xBE906D6A> : tensor<f32>} : () -> tensor<f32>
    %32 = "stablehlo.broadcast_in_dim"(%31) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %33 = "stablehlo.multiply"(%30, %8) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %34 = "stablehlo.add"(%33, %32) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %35 = "stablehlo.constant"() {value = dense<0x3F106EBA> : tensor<f32>} : () -> tensor<f32>
    %36 = "stablehlo.broadcast_in_dim"(%35) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %37 = "stablehlo.multiply"(%34, %8) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %38 = "stablehlo.add"(%37, %36) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %39 = "stablehlo.constant"() {value = dense<0x3CBE9165> : tensor<f32>} : () -> tensor<f32>
    %40 = "stablehlo.broadcast_in_dim"(%39) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %41 = "stablehlo.constant"() {value = dense<0xBE0E0136> : tensor<f32>} : () -> tensor<f32>
    %42 = "stablehlo.broadcast_in_dim"(%41) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %43 = "stablehlo.multiply"(%40, %8) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %44 = "stablehlo.add"(%43, %42) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %45 = "stablehlo.constant"() {value = dense<0x3EBCC42D> : tensor<f32>} : () -> tensor<f32>
    %46 = "stablehlo.broadcast_in_dim"(%45) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %47 = "stablehlo.multiply"(%44, %8) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %48 = "stablehlo.add"(%47, %46) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %49 = "stablehlo.constant"() {value = dense<0xBF151878> : tensor<f32>} : () -> tensor<f32>
    %50 = "stablehlo.broadcast_in_dim"(%49) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %51 = "stablehlo.multiply"(%48, %8) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %52 = "stablehlo.add"(%51, %50) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %53 = "stablehlo.constant"() {value = dense<0x3F1EF6AB> : tensor<f32>} : () -> tensor<f32>
    %54 = "stablehlo.broadcast_in_dim"(%53) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %55 = "stablehlo.multiply"(%52, %8) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %56 = "stablehlo.add"(%55, %54) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %57 = "stablehlo.constant"() {value = dense<0xBEFD25E7> : tensor<f32>} : () -> tensor<f32>
    %58 = "stablehlo.broadcast_in_dim"(%57) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %59 = "stablehlo.multiply"(%56, %8) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %60 = "stablehlo.add"(%59, %58) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %61 = "stablehlo.constant"() {value = dense<0x3EAE53AE> : tensor<f32>} : () -> tensor<f32>
    %62 = "stablehlo.broadcast_in_dim"(%61) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %63 = "stablehlo.multiply"(%60, %8) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %64 = "stablehlo.add"(%63, %62) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %65 = "stablehlo.constant"() {value = dense<0xBE8C5863> : tensor<f32>} : () -> tensor<f32>
    %66 = "stablehlo.broadcast_in_dim"(%65) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %67 = "stablehlo.multiply"(%64, %8) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %68 = "stablehlo.add"(%67, %66) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %69 = "stablehlo.constant"() {value = dense<0x3F1056E5> : tensor<f32>} : () -> tensor<f32>
    %70 = "stablehlo.broadcast_in_dim"(%69) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %71 = "stablehlo.multiply"(%68, %8) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %72 = "stablehlo.add"(%71, %70) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %73 = "stablehlo.constant"() {value = dense<0x40000000> : tensor<f32>} : () -> tensor<f32>
    %74 = "stablehlo.broadcast_in_dim"(%73) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %75 = "stablehlo.compare"(%4, %74) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xi1>
    %76 = "stablehlo.select"(%75, %72, %38) : (tensor<3x16xi1>, tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %77 = "stablehlo.multiply"(%4, %4) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %78 = "stablehlo.negate"(%77) : (tensor<3x16xf32>) -> tensor<3x16xf32>
    %79 = "stablehlo.exponential"(%78) : (tensor<3x16xf32>) -> tensor<3x16xf32>
    %80 = "stablehlo.multiply"(%79, %76) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %81 = "stablehlo.divide"(%80, %4) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %82 = "stablehlo.constant"() {value = dense<0x3F800000> : tensor<f32>} : () -> tensor<f32>
    %83 = "stablehlo.broadcast_in_dim"(%82) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %84 = "stablehlo.subtract"(%83, %81) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %85 = "stablehlo.negate"(%84) : (tensor<3x16xf32>) -> tensor<3x16xf32>
    %86 = "stablehlo.constant"() {value = dense<0x00000000> : tensor<f32>} : () -> tensor<f32>
    %87 = "stablehlo.broadcast_in_dim"(%86) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %88 = "stablehlo.compare"(%3, %87) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xi1>
    %89 = "stablehlo.select"(%88, %85, %84) : (tensor<3x16xi1>, tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %90 = "stablehlo.multiply"(%3, %3) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %91 = "stablehlo.constant"() {value = dense<0x38A4B4E5> : tensor<f32>} : () -> tensor<f32>
    %92 = "stablehlo.broadcast_in_dim"(%91) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %93 = "stablehlo.constant"() {value = dense<0xBA51FB6C> : tensor<f32>} : () -> tensor<f32>
    %94 = "stablehlo.broadcast_in_dim"(%93) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %95 = "stablehlo.multiply"(%92, %90) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %96 = "stablehlo.add"(%95, %94) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %97 = "stablehlo.constant"() {value = dense<0x3BAA02D6> : tensor<f32>} : () -> tensor<f32>
    %98 = "stablehlo.broadcast_in_dim"(%97) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %99 = "stablehlo.multiply"(%96, %90) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %100 = "stablehlo.add"(%99, %98) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %101 = "stablehlo.constant"() {value = dense<0xBCDBFC86> : tensor<f32>} : () -> tensor<f32>
    %102 = "stablehlo.broadcast_in_dim"(%101) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %103 = "stablehlo.multiply"(%100, %90) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %104 = "stablehlo.add"(%103, %102) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %105 = "stablehlo.constant"() {value = dense<0x3DE7167C> : tensor<f32>} : () -> tensor<f32>
    %106 = "stablehlo.broadcast_in_dim"(%105) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %107 = "stablehlo.multiply"(%104, %90) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %108 = "stablehlo.add"(%107, %106) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %109 = "stablehlo.constant"() {value = dense<0xBEC0939F> : tensor<f32>} : () -> tensor<f32>
    %110 = "stablehlo.broadcast_in_dim"(%109) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %111 = "stablehlo.multiply"(%108, %90) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %112 = "stablehlo.add"(%111, %110) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %113 = "stablehlo.constant"() {value = dense<0x3F906EBA> : tensor<f32>} : () -> tensor<f32>
    %114 = "stablehlo.broadcast_in_dim"(%113) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %115 = "stablehlo.multiply"(%112, %90) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %116 = "stablehlo.add"(%115, %114) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %117 = "stablehlo.multiply"(%3, %116) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %118 = "stablehlo.constant"() {value = dense<0x3F800000> : tensor<f32>} : () -> tensor<f32>
    %119 = "stablehlo.broadcast_in_dim"(%118) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %120 = "stablehlo.compare"(%4, %119) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xi1>
    %121 = "stablehlo.select"(%120, %117, %89) : (tensor<3x16xi1>, tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %122 = "stablehlo.compare"(%3, %3) {comparison_direction = #stablehlo<comparison_direction NE>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xi1>
    %123 = "stablehlo.select"(%122, %3, %121) : (tensor<3x16xi1>, tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %124 = "stablehlo.constant"() {value = dense<0x3F800000> : tensor<f32>} : () -> tensor<f32>
    %125 = "stablehlo.broadcast_in_dim"(%124) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %126 = "stablehlo.add"(%125, %123) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %127 = "stablehlo.constant"() {value = dense<0x3F000000> : tensor<f32>} : () -> tensor<f32>
    %128 = "stablehlo.broadcast_in_dim"(%127) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x16xf32>
    %129 = "stablehlo.multiply"(%0, %128) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %130 = "stablehlo.multiply"(%129, %126) : (tensor<3x16xf32>, tensor<3x16xf32>) -> tensor<3x16xf32>
    %131 = "stablehlo.reshape"(%130) : (tensor<3x16xf32>) -> tensor<48xf32>
    "func.return"(%131) : (tensor<48xf32>) -> ()
  }
  func.func private @graph_f7(%arg0: tensor<48xf32>, %arg1: tensor<64xf32>, %arg2: tensor<4xf32>) -> (tensor<12xf32>) {
    %0 = "stablehlo.reshape"(%arg0) : (tensor<48xf32>) -> tensor<3x16xf32>
    %1 = "stablehlo.reshape"(%arg1) : (tensor<64xf32>) -> tensor<4x16x1xf32>
    %2 = "stablehlo.reshape"(%1) : (tensor<4x16x1xf32>) -> tensor<4x16xf32>
    %3 = "stablehlo.transpose"(%2) {permutation = array<i64: 1, 0>} : (tensor<4x16xf32>) -> tensor<16x4xf32>
    %4 = "stablehlo.dot_general"(%0, %3) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]} : (tensor<3x16xf32>, tensor<16x4xf32>) -> tensor<3x4xf32>
    %5 = "stablehlo.constant"() {value = dense<0x3F800000> : tensor<f32>} : () -> tensor<f32>
    %6 = "stablehlo.broadcast_in_dim"(%5) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x4xf32>
    %7 = "stablehlo.multiply"(%4, %6) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    %8 = "stablehlo.broadcast_in_dim"(%arg2) {broadcast_dimensions = array<i64: 1>} : (tensor<4xf32>) -> tensor<3x4xf32>
    %9 = "stablehlo.constant"() {value = dense<0x3F800000> : tensor<f32>} : () -> tensor<f32>
    %10 = "stablehlo.constant"() {value = dense<0x00000000> : tensor<f32>} : () -> tensor<f32>
    %11 = "stablehlo.broadcast_in_dim"(%9) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x4xf32>
    %12 = "stablehlo.multiply"(%8, %11) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    %13 = "stablehlo.compare"(%9, %10) {comparison_direction = #stablehlo<comparison_direction EQ>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %14 = "stablehlo.broadcast_in_dim"(%10) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<3x4xf32>
    %15 = "stablehlo.select"(%13, %14, %12) : (tensor<i1>, tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    %16 = "stablehlo.add"(%15, %7) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    %17 = "stablehlo.reshape"(%16) : (tensor<3x4xf32>) -> tensor<12xf32>
    "func.return"(%17) : (tensor<12xf32>) -> ()
  }
  func.func private @graph_main(%arg0: tensor<24xf32>, %arg1: tensor<128xf32>, %arg2: tensor<16xf32>, %arg3: tensor<64xf32>, %arg4: tensor<4xf32>) -> (tensor<12xf32>) {
    %c0 = "func.call"(%arg0, %arg1, %arg2) <{callee = @graph_f5}> : (tensor<24xf32>, tensor<128xf32>, tensor<16xf32>) -> (tensor<48xf32>)
    %c1 = "func.call"(%c0) <{callee = @graph_f6}> : (tensor<48xf32>) -> (tensor<48xf32>)
    %c2 = "func.call"(%c1, %arg3, %arg4) <{callee = @graph_f7}> : (tensor<48xf32>, tensor<64xf32>, tensor<4xf32>) -> (tensor<12xf32>)
    "func.return"(%c2) : (tensor<12xf32>) -> ()
  }
}
